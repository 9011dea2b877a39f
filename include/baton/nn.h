// Neural-network building blocks: modules, layers, initialisation, ResNet-18.
#pragma once
#include "baton/nn/init.h"
#include "baton/nn/layers.h"
#include "baton/nn/module.h"
#include "baton/nn/models.h"
